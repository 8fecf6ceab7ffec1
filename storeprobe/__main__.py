from storeprobe.cli import main

raise SystemExit(main())
