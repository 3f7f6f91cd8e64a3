from podium.cli.main import main

main()
