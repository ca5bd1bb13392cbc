/** Debian's Chromium (installed by .ci/run) as the end-to-end suites launch it with playwright-core. */
export const CHROMIUM = '/usr/bin/chromium';

/** Flags for a quiet, sandbox-free headless run on a machine with no GPU and no network. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
