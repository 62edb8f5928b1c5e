"""Beyond one machine: the Runner's sandboxed steps as Ray tasks, the study's host actor on the head node,
and the per-node record ``metasearch status`` shows (see ``ray_executor``)."""
