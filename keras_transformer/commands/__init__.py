"""Sub-commands of the `keras-transformer` command (see `keras_transformer.commands.cli`)."""
