/**
 * Imported first by main.tsx. zod compiles fast object parsers with `new Function` after probing
 * whether eval is allowed; under the page's CSP (no 'unsafe-eval') that probe is refused and reported
 * as a script-src violation on every page load. jitless mode skips the probe and the compiled path.
 */
import { z } from "zod";

z.config({ jitless: true });
