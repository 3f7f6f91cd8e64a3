from podium.cli import main

main()
