from gaugekit.cli import main

raise SystemExit(main())
