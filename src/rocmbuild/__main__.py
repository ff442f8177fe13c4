from rocmbuild.cli import main

raise SystemExit(main())
