from lcr.cli.main import main

main()
