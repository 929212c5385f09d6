"""This machine's runtime: the state store and its repair, full disks, processes, the supervisor of
local and Docker jobs and its doorbell, the kept requests."""
