from lcr.cli import main

main()
