"""The text of the character-level language model — tiny-shakespeare or a built-in text.

:func:`load_text` returns a :class:`Text`: the characters, their integer ids, the vocabulary and
the name of the text actually used, which the records keep. ``"tinyshakespeare"`` is the file
``text/tinyshakespeare_input.txt`` of the data folder (found by
:func:`gaugebook.engine.datafiles.find_file`, checked against its SHA-256; a file with another
checksum
is refused with a :class:`~gaugebook.engine.datafiles.DataFileError`). ``"builtin"`` is a short
public domain passage shipped with the package, the default of CI machines that have no data folder.
``"auto"`` takes tiny-shakespeare when the file is there and the built-in text otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import Tensor

from gaugebook.engine.datafiles import MissingDataFileError, find_file

__all__ = [
    "BUILTIN_TEXT",
    "TEXT_NAMES",
    "TINYSHAKESPEARE",
    "Text",
    "load_text",
]

#: Where the tiny-shakespeare corpus is (path in the data folder), its SHA-256 and its source.
TINYSHAKESPEARE = {
    "relpath": "text/tinyshakespeare_input.txt",
    "sha256": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "url": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
}
#: The names :func:`load_text` accepts (``"auto"``: tiny-shakespeare if present, else built-in).
TEXT_NAMES: tuple[str, ...] = ("auto", "tinyshakespeare", "builtin")

#: A built-in text of about 2,000 characters, public domain (Shakespeare's Sonnets 18, 29
#: and 116), enough characters for a few hundred windows of 64.
BUILTIN_TEXT = """\
Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.

When, in disgrace with fortune and men's eyes,
I all alone beweep my outcast state,
And trouble deaf heaven with my bootless cries,
And look upon myself and curse my fate,
Wishing me like to one more rich in hope,
Featured like him, like him with friends possess'd,
Desiring this man's art and that man's scope,
With what I most enjoy contented least;
Yet in these thoughts myself almost despising,
Haply I think on thee, and then my state,
Like to the lark at break of day arising
From sullen earth, sings hymns at heaven's gate;
For thy sweet love remember'd such wealth brings
That then I scorn to change my state with kings.

Let me not to the marriage of true minds
Admit impediments. Love is not love
Which alters when it alteration finds,
Or bends with the remover to remove:
O no! it is an ever-fixed mark
That looks on tempests and is never shaken;
It is the star to every wandering bark,
Whose worth's unknown, although his height be taken.
Love's not Time's fool, though rosy lips and cheeks
Within his bending sickle's compass come;
Love alters not with his brief hours and weeks,
But bears it out even to the edge of doom.
If this be error and upon me proved,
I never writ, nor no man ever loved.
"""


@dataclass(frozen=True)
class Text:
    """A text for a character LM: ``name`` of the text used, the characters, the sorted
    vocabulary and the ids (``ids[i] = vocab.index(chars[i])``)."""

    name: str
    chars: str
    vocab: str
    ids: Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def decode(self, ids: Tensor) -> str:
        return "".join(self.vocab[int(i)] for i in ids)


def load_text(
    name: str = "auto",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    max_chars: int | None = None,
    download: bool = False,
) -> Text:
    """The text ``name`` (one of :data:`TEXT_NAMES`), cut to its first ``max_chars`` characters.

    ``"tinyshakespeare"`` raises :class:`~gaugebook.engine.datafiles.MissingDataFileError` when the
    file is absent (downloaded first with ``download=True``) and
    :class:`~gaugebook.engine.datafiles.DataFileError` when its checksum is wrong; ``"auto"`` falls
    back to the built-in text only when the file is absent (a wrong checksum is still refused).
    """
    if name not in TEXT_NAMES:
        raise ValueError(f"Invalid name: {name!r}; expected one of {TEXT_NAMES}")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                  or max_chars < 2):
        raise ValueError(f"Invalid max_chars: {max_chars!r}; expected an integer >= 2 or None")
    chars, used = BUILTIN_TEXT, "builtin"
    if name != "builtin":
        try:
            path = find_file(
                TINYSHAKESPEARE["relpath"], TINYSHAKESPEARE["sha256"], TINYSHAKESPEARE["url"],
                data_dir, download=download,
            )
            chars, used = path.read_text(encoding="utf-8"), "tinyshakespeare"
        except MissingDataFileError:
            if name == "tinyshakespeare":
                raise
    if max_chars is not None:
        chars = chars[:max_chars]
    vocab = "".join(sorted(set(chars)))
    index = {c: i for i, c in enumerate(vocab)}
    return Text(used, chars, vocab, torch.tensor([index[c] for c in chars], dtype=torch.long))
