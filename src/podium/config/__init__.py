"""The settings file: every section, the webhooks, and the deployment's topology."""
