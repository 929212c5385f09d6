"""Instance catalogs: the rows a plugin ships, the instance type chosen for a job, its price, and
``cloudtrain resources``."""
