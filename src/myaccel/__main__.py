from myaccel.cli.main import main

main()
