// The /v2 evaluation runs, predictions and scores suite again, on the ClickHouse backend in-process (chdb): the same
// assertions on both backends (runs, predictions and scores are calls plus ops and feedback, through the backend
// interfaces). The suite's servers inherit WEFT_STORAGE; set before the suite (and its helpers) load, hence the dynamic
// import. Without chdb installed (an optional dependency) the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./v2-runs.test.js')
