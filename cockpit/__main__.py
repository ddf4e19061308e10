from cockpit.entry import run

run()
