// The query-language, expand_columns and Arrow-answer suites again, on the ClickHouse backend in-process (chdb): the
// same cases (feedback fields and expanded refs in call filters and sorts, Arrow IPC answers) answer the same on both
// backends. The suites' servers inherit WEFT_STORAGE; set before the suites (and their helpers) load, hence the dynamic
// imports. Without chdb installed the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./query-language.test.js')
await import('./calls-expand.test.js')
await import('./arrow-answers.test.js')
