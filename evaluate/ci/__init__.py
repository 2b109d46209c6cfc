"""A run seen by CI: the gates (`--fail-under`, `--fail-if-worse`, `--fail-under-win-rate`,
`--fail-on-untrusted-judge`; `gates`) and the files a CI system reads (`--junit`, `--markdown`;
`reports`). Both read a finished run's log, or check a gate's names against a plan before it runs."""
