"""The embedded demo: emulator + real operator + real worker processes, and its drill."""
