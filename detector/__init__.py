"""Pure analysis: measurement records in, named cache levels out. Never imports torch or triton."""
