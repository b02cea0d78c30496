"""Systems experiment drivers.

ann (SmartANN), tracing (ARGUS), elastic (LiveR), rdma (SHIFT), netsched (vClos).
"""
