/** Reading a source file's imports as text, for the tests that check which modules may import which. */

/** The module specifiers of a file's import and export-from statements, dynamic imports and requires. */
export function specifiers(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(
    /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|require\(\s*['"]([^'"]+)['"]\s*\)/g,
  )) {
    found.push((m[1] ?? m[2] ?? m[3])!);
  }
  return found;
}
