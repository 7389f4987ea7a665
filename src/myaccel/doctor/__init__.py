"""`myaccel doctor`: what each command needs from this host (tools, privileges, kernel
features, disk) and what is missing, with the package manager's line that fixes it."""
