// The service's entry point, built to dist/server.js (npm start, the Docker image): it starts
// main/server.ts. It stays here so that path holds whatever moves inside src/.
import './main/server.js';
