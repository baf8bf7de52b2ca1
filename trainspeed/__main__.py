from trainspeed.cli import program

program()
