from pocketmcp.cli import main

raise SystemExit(main())
