"""`kubectl kai`: a kubectl plugin (the executable `kubectl-kai`) that shows what the scheduler knows, read
from the cluster through the user's kubeconfig, as `kubectl get` shows things:

* `kubectl kai queues`: the queue tree with each queue's quota, limit, fair share, allocated and
  requested (`queues.py`);
* `kubectl kai why [POD|PODGROUP]`: why a pod or pod group waits, from its conditions and events, and
  what would let it start (`why.py`); without a name, every waiting pod group of the namespace;
* `kubectl kai top`: GPU allocation per node and per shared GPU (`top.py`).

`main.py` parses the command line and turns every error into one line and an exit status; `api_client.py`
reads the objects; `amounts.py` reads and formats pods' and queues' resources; `table.py` prints the
tables. It only reads: nothing is written to the cluster.
"""
