// The CLI's entry point, built to dist/cli.js (`node dist/cli.js …` in the Docker image, `npm run
// cli --` from a checkout): it runs main/cli/cli.ts. It stays here so that path holds whatever
// moves inside src/.
import './main/cli/cli.js';
