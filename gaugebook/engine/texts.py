"""The text of the character-level language model — tiny-shakespeare or a built-in text.

:func:`load_text` returns a :class:`Text`: the characters, their integer ids, the vocabulary and
the name of the text actually used, which the records keep. ``"tinyshakespeare"`` is the file
``text/tinyshakespeare_input.txt`` of the data folder (found by
:func:`gaugebook.engine.datafiles.find_file`, checked against its SHA-256; a file with another
checksum
is refused with a :class:`~gaugebook.engine.datafiles.DataFileError`). ``"builtin"`` is a short
public domain passage shipped with the package, the default of CI machines that have no data folder.
``"auto"`` takes tiny-shakespeare when the file is there and the built-in text otherwise.

``"python_reference"`` is the second text, of another kind: the topic pages of the Python
language reference (``text/python_reference_topics.txt``, checked against its SHA-256; its
provenance is in the data folder's README), the fine-tuning text of the LoRA chapter. When the
file is absent, ``"auto_python_reference"`` writes the same pages from the running
interpreter's own ``pydoc_data.topics`` by the README's recipe (another Python version gives
another text, named ``"pydoc_topics_<version>"`` in the records).

Two texts share one vocabulary when a model trained on one is fine-tuned on the other:
``load_text(name, vocab=joint_vocab(...))`` encodes with a given vocabulary, and
:func:`joint_vocab` is the sorted union of the texts' characters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import Tensor

from gaugebook.engine.datafiles import MissingDataFileError, find_file

__all__ = [
    "BUILTIN_TEXT",
    "PYTHON_REFERENCE",
    "TEXT_NAMES",
    "TINYSHAKESPEARE",
    "Text",
    "joint_vocab",
    "load_text",
]

#: Where the tiny-shakespeare corpus is (path in the data folder), its SHA-256 and its source.
TINYSHAKESPEARE = {
    "relpath": "text/tinyshakespeare_input.txt",
    "sha256": "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    "url": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
}
#: Where the Python language reference's topic pages are (path in the data folder), their
#: SHA-256 and how they were made (there is no download: the recipe writes them).
PYTHON_REFERENCE = {
    "relpath": "text/python_reference_topics.txt",
    "sha256": "71f2ff5d99bdc1f9c48c5c2353ad138201c5ca1c377e0226857ef8fa89b8bcee",
    "recipe": ("python3.11 -c \"import pydoc_data.topics as t; d=t.topics; "
               "open(F,'w',encoding='utf-8').write('\\n\\n'.join(d[k] for k in sorted(d)))\""),
}
#: The names :func:`load_text` accepts (``"auto"``: tiny-shakespeare if present, else built-in;
#: ``"auto_python_reference"``: the reference's file if present, else the interpreter's pages).
TEXT_NAMES: tuple[str, ...] = ("auto", "tinyshakespeare", "builtin", "python_reference",
                               "auto_python_reference")

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


def _pydoc_topics() -> tuple[str, str]:
    """The running interpreter's topic pages, joined as the data folder's file was made."""
    import platform
    import pydoc_data.topics as topics

    pages = topics.topics
    return "\n\n".join(pages[k] for k in sorted(pages)), f"pydoc_topics_{platform.python_version()}"


def _python_reference(name: str, data_dir: str | os.PathLike[str] | None) -> tuple[str, str]:
    try:
        path = find_file(PYTHON_REFERENCE["relpath"], PYTHON_REFERENCE["sha256"], None, data_dir,
                         download=False)
    except MissingDataFileError as err:
        if name == "python_reference":
            raise MissingDataFileError(
                f"{err} It is made by {PYTHON_REFERENCE['recipe']} (with F the file's path), "
                "or use the text 'auto_python_reference', which writes it from this interpreter."
            ) from err
        return _pydoc_topics()
    return path.read_text(encoding="utf-8"), "python_reference"


def joint_vocab(*texts: Text) -> str:
    """The sorted union of the texts' characters: one vocabulary for all of them."""
    return "".join(sorted(set().union(*(set(t.vocab) for t in texts))))


def load_text(
    name: str = "auto",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    max_chars: int | None = None,
    download: bool = False,
    vocab: str | None = None,
) -> Text:
    """The text ``name`` (one of :data:`TEXT_NAMES`), cut to its first ``max_chars`` characters.

    ``"tinyshakespeare"`` raises :class:`~gaugebook.engine.datafiles.MissingDataFileError` when the
    file is absent (downloaded first with ``download=True``) and
    :class:`~gaugebook.engine.datafiles.DataFileError` when its checksum is wrong; ``"auto"`` falls
    back to the built-in text only when the file is absent (a wrong checksum is still refused).
    ``"python_reference"`` and ``"auto_python_reference"`` likewise (module doc). ``vocab``:
    encode with this vocabulary (sorted characters) instead of the text's own; a character
    outside it is a :class:`ValueError`.
    """
    if name not in TEXT_NAMES:
        raise ValueError(f"Invalid name: {name!r}; expected one of {TEXT_NAMES}")
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int)
                                  or max_chars < 2):
        raise ValueError(f"Invalid max_chars: {max_chars!r}; expected an integer >= 2 or None")
    if name in ("python_reference", "auto_python_reference"):
        chars, used = _python_reference(name, data_dir)
    else:
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
    if vocab is None:
        vocab = "".join(sorted(set(chars)))
    elif missing := sorted(set(chars) - set(vocab)):
        raise ValueError(f"Invalid vocab: the text {used!r} has characters outside it: "
                         f"{''.join(missing)[:40]!r}")
    index = {c: i for i, c in enumerate(vocab)}
    return Text(used, chars, vocab, torch.tensor([index[c] for c in chars], dtype=torch.long))
