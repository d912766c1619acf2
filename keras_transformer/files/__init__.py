"""The files this package writes, and the rules that keep a user's files safe.

Everything that a crash must not leave half-written is written through a
temporary path and a rename (`atomic`). A run and an export each keep a record
of the files they wrote (`run_files`, `manifest`), and a command deletes or
replaces only those (`ownership`), in folders it may write (`destinations`);
result files never land on what a job reads (`output_files`). Text files are
read with errors that name the file and the line (`text_files`), JSON files from
elsewhere bounded and checked (`json_files`). What is kept between processes
lives in the user's cache folder (`user_cache`). What a model folder is (a
run directory, a SavedModel, a LiteRT export) is decided once (`folders`). This wing
imports nothing else of the package but `errors` and `input_rules`.
"""

__all__ = [
    "atomic",
    "destinations",
    "folders",
    "json_files",
    "manifest",
    "output_files",
    "ownership",
    "run_files",
    "text_files",
    "user_cache",
]
