/** The one control-character rule of user text lives in the library (src/lib/user-text.ts). */
export { hasControlCharacter } from '../lib/user-text.js';
