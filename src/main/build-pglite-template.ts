// Part of `npm run build`: initialises the embedded database's template once per PGlite release
// and settings (see db/pglite-template.ts), so that no first start of the server runs initdb.
import { createPgliteTemplate, DEFAULT_TEMPLATE_DIR, isUsableTemplate } from '../db/pglite-template.js';

if (isUsableTemplate(DEFAULT_TEMPLATE_DIR)) {
  process.stdout.write(`pglite template: ${DEFAULT_TEMPLATE_DIR} is up to date\n`);
} else {
  const started = Date.now();
  await createPgliteTemplate(DEFAULT_TEMPLATE_DIR);
  process.stdout.write(`pglite template: initialised ${DEFAULT_TEMPLATE_DIR} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}
