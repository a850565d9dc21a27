import { createRequire } from 'node:module';

// Read at run time so that src/ (run directly by Node) and dist/ (built) report the same version:
// both sit one level below package.json.
const pkg = createRequire(import.meta.url)('../package.json') as { version: string };

export const VERSION: string = pkg.version;
export const USER_AGENT = `webdata-etl/${VERSION}`;
