from batch.cli import main

main()
