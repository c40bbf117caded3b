from gaugebook.commands import main

raise SystemExit(main())
