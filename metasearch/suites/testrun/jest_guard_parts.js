// What jest_guard.js (a spec file's environment) and jest_worker_guard.js (a worker thread the code under
// test starts) both lay down before that code runs. Grader-owned, outside the exercise folder.
'use strict';

const PATCH = 'metasearch: the code under test tried to replace a part of the test framework';
const EXIT = 'metasearch: the code under test tried to end the test process';
const CODE = 'metasearch: the code under test tried to make code from a string';
const MODULES = 'metasearch: the code under test tried to load a built-in module through process';

function refuse(message) {
  return function refused() {
    throw new Error(message);
  };
}

// Code from strings: one stand-in for Function and every function's `constructor`, so that
// `fn.constructor === Function` and `fn instanceof Function` still hold; eval refused too.
function neuterCode(global, message) {
  const standIn = refuse(message);
  Object.defineProperty(standIn, 'name', { value: 'Function' });
  Object.defineProperty(standIn, 'prototype', { value: Function.prototype });
  const kinds = [function () {}, async function () {}, function* () {}, async function* () {}];
  for (const kind of kinds) {
    Object.defineProperty(Object.getPrototypeOf(kind), 'constructor', { value: standIn, configurable: false });
  }
  pin(global, 'Function', standIn);
  pin(global, 'eval', refuse(message));
  return kinds;
}

// A global name that keeps its value: assigning it throws, redefining it is impossible.
function pin(global, name, value) {
  Object.defineProperty(global, name, {
    get() {
      return value;
    },
    set() {
      throw new Error(`${PATCH}: ${name}`);
    },
    enumerable: false,
    configurable: false,
  });
}

// A process object that cannot end the run early or hand out Node's built-in modules by name.
function guardProcess(proc, messages = { EXIT, MODULES }) {
  const parts = {
    exit: messages.EXIT, reallyExit: messages.EXIT, abort: messages.EXIT, kill: messages.EXIT,
    _kill: messages.EXIT, getBuiltinModule: messages.MODULES, binding: messages.MODULES,
    _linkedBinding: messages.MODULES, dlopen: messages.MODULES,
  };
  for (const [name, message] of Object.entries(parts)) {
    try {
      Object.defineProperty(proc, name, { value: refuse(message), writable: false, configurable: false });
    } catch (error) {
      // a property made unconfigurable before stays as it is
    }
  }
}

// Worker threads start with `guard` loaded first (node --require): only from a file, never from a
// string (eval) or a data: URL, whatever else their options say.
function guardWorkers(threads, guard) {
  const Real = threads.Worker;
  if (!Real || Real.guarded) return;
  class Worker extends Real {
    constructor(filename, options = {}) {
      const url = typeof filename === 'object' && filename !== null && 'protocol' in filename;
      if ((options && options.eval) || (url && filename.protocol !== 'file:')) throw new Error(CODE);
      const execArgv = ['--require', guard, ...((options && options.execArgv) || [])];
      super(filename, { ...options, execArgv });
    }
  }
  Object.defineProperty(Worker, 'guarded', { value: true });
  Object.defineProperty(threads, 'Worker', { value: Worker, writable: false, configurable: false });
}

module.exports = { PATCH, EXIT, CODE, MODULES, refuse, pin, neuterCode, guardProcess, guardWorkers };
