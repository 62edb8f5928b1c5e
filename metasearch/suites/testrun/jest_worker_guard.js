// Loaded first in every worker thread the code under test starts from a spec file's environment (node
// --require, added by jest_guard.js to each Worker's execArgv). A worker runs outside jest's realm and
// outside jest_guard.js, with Node's own require, so the same ground rules are laid here before its code
// runs: no code from strings, no early end or built-in modules through `process`, no modules that reach
// the system (processes, files, the network, the inspector, the module loader), and workers of its own
// only under this file too. A refusal is thrown as "metasearch: ..."; it reaches the spec file as the
// worker's error, and the grader reads it there. Grader-owned, outside the exercise folder.
'use strict';

const { CODE, EXIT, MODULES, refuse, neuterCode, guardProcess, guardWorkers } = require('./jest_guard_parts.js');

const SYSTEM = new Set([
  'child_process', 'cluster', 'vm', 'inspector', 'inspector/promises', 'v8', 'module', 'net', 'dgram', 'http',
  'https', 'http2', 'tls', 'dns', 'dns/promises', 'repl', 'wasi', 'fs', 'fs/promises', 'trace_events',
  'diagnostics_channel', 'async_hooks',
]);
const SYSTEM_MODULE = 'metasearch: the code under test tried to load a module that reaches the system';

const Module = require('module');
const load = Module._load;
Object.defineProperty(Module, '_load', {
  value: function guardedLoad(request, ...rest) {
    const name = String(request).replace(/^node:/, '');
    if (SYSTEM.has(name)) throw new Error(`${SYSTEM_MODULE}: ${name}`);
    return load.call(this, request, ...rest);
  },
  writable: false,
  configurable: false,
});
guardWorkers(require('worker_threads'), __filename);
guardProcess(process, { EXIT, MODULES });
neuterCode(globalThis, CODE);
void refuse;
