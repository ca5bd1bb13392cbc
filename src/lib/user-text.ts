/**
 * Text that users send and the service keeps or shows (emails, webhook URLs and descriptions, batch
 * file names) never holds a control character (docs/contract.md, "User text"): Unicode category Cc,
 * that is the C0 controls (NUL, TAB, CR and LF among them), DEL and the C1 controls. PostgreSQL
 * cannot store a NUL at all, and the others have no business in a one-line value shown on a page,
 * in a log or on a terminal. Every place that takes such text asks this one helper, before the
 * store sees the text.
 */

const CONTROL_CHARACTER = /\p{Cc}/u;

export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}
