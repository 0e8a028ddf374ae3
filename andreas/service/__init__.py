"""What users do through the ``andreas`` command, above the store: submit and cancel jobs
(``submit``) and read them, their attempts, costs and nodes (``views``)."""
