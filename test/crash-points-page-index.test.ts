import { crashChain } from './helpers/crash-matrix.js'

// No chat in this file: its servers start without the built-in model (about 1 s of CPU less per start).
process.env.WEFT_MODEL ??= 'none'
// Page indexes from the first compaction on (a server writes them only past 200,000 parts by default).
process.env.WEFT_PAGE_INDEX_MIN_PARTS = '0'

// A compaction writing a segment's page index (derived data, written before the manifest names it): killed
// after the block file or the index file is fsynced and before it is renamed into place, so the next start finds a
// stray file.
crashChain('crash points of the page index', [{ point: 'page-blocks.before-rename' }, { point: 'page-index.before-rename' }])
