"""Jobs across providers: the ledger of every submission from this machine and failover from one
provider to the next."""
