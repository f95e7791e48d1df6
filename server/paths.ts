/**
 * Where the package keeps its bundled files, resolved from this module's URL
 * so it works from a checkout and from an installed package alike.
 */
import { fileURLToPath } from 'node:url';

export const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The bundled default generative model (stories260K, Llama architecture). */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL('../models/stories260K', import.meta.url));
