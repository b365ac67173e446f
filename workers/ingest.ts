// Piscina worker: parses, validates and encodes ingest bodies off the event loop.
export { prepareIngest as default } from '../src/calls/prepare.js'
