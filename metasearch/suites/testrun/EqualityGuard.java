package metasearch;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.lang.reflect.Method;
import java.security.ProtectionDomain;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * A grader-owned Java agent for the JUnit run: every {@code equals(Object)} defined in the code under test
 * (classes compiled from the solution's source files, named by the agent's argument) is wrapped, so that
 * whenever it answers "equal" it is asked once more, about values made up on the spot that nothing honest
 * equals (a new {@code Object}; a near miss of a string, number or collection; a twin of one of the
 * solution's own values with every field changed). An equals that says "equal" to one of them
 * is a value that passes every equality assertion: the agent says so on the standard error, and the grader
 * flags the run. The original method is kept, renamed and private, so the code under test cannot call
 * around the wrapper by name.
 */
public final class EqualityGuard implements ClassFileTransformer {
    static final String RENAMED = "equals$metasearch";
    static final String EQUALS = "(Ljava/lang/Object;)Z";
    static final String REFUSAL = "metasearch: the code under test tried to make a value that equals anything: ";
    private static final ThreadLocal<Boolean> BUSY = ThreadLocal.withInitial(() -> false);
    private static final Set<String> REPORTED = java.util.Collections.synchronizedSet(new HashSet<>());
    private final Set<String> sources;

    private EqualityGuard(Set<String> sources) {
        this.sources = sources;
    }

    /** {@code args}: the solution's source file names, comma-separated ({@code Clock.java,Util.java}). */
    public static void premain(String args, Instrumentation instrumentation) {
        Set<String> sources = new HashSet<>(Arrays.asList((args == null ? "" : args).split(",")));
        instrumentation.addTransformer(new EqualityGuard(sources));
    }

    @Override
    public byte[] transform(
            ClassLoader loader, String name, Class<?> redefined, ProtectionDomain domain, byte[] bytes) {
        try {
            ClassReader reader = new ClassReader(bytes);
            String[] source = {null};
            boolean[] defines = {false};
            reader.accept(new ClassVisitor(Opcodes.ASM9) {
                @Override
                public void visitSource(String file, String debug) {
                    source[0] = file;
                }

                @Override
                public MethodVisitor visitMethod(int access, String method, String desc, String sig, String[] ex) {
                    defines[0] |= isEquals(access, method, desc);
                    return null;
                }
            }, ClassReader.SKIP_CODE | ClassReader.SKIP_FRAMES);
            if (!defines[0] || source[0] == null || !sources.contains(source[0])) {
                return null;
            }
            ClassWriter writer = new ClassWriter(reader, 0);
            reader.accept(new Wrapper(writer), 0);
            return writer.toByteArray();
        } catch (RuntimeException exc) {
            System.err.println(REFUSAL + name + " (could not be checked: " + exc + ")");
            return null;
        }
    }

    static boolean isEquals(int access, String method, String desc) {
        return method.equals("equals") && desc.equals(EQUALS) && (access & Opcodes.ACC_ABSTRACT) == 0
                && (access & Opcodes.ACC_STATIC) == 0;
    }

    /** Keeps {@code equals} under a private name and puts a wrapper that calls it, then {@link #after}. */
    static final class Wrapper extends ClassVisitor {
        private String owner;

        Wrapper(ClassVisitor next) {
            super(Opcodes.ASM9, next);
        }

        @Override
        public void visit(int version, int access, String name, String sig, String parent, String[] faces) {
            owner = name;
            super.visit(version, access, name, sig, parent, faces);
        }

        @Override
        public MethodVisitor visitMethod(int access, String method, String desc, String sig, String[] ex) {
            if (!isEquals(access, method, desc)) {
                return super.visitMethod(access, method, desc, sig, ex);
            }
            MethodVisitor wrapper = super.visitMethod(access & ~Opcodes.ACC_SYNCHRONIZED, method, desc, sig, ex);
            wrapper.visitCode();
            wrapper.visitVarInsn(Opcodes.ALOAD, 0);
            wrapper.visitVarInsn(Opcodes.ALOAD, 1);
            wrapper.visitVarInsn(Opcodes.ALOAD, 0);
            wrapper.visitVarInsn(Opcodes.ALOAD, 1);
            wrapper.visitMethodInsn(Opcodes.INVOKESPECIAL, owner, RENAMED, EQUALS, false);
            wrapper.visitMethodInsn(Opcodes.INVOKESTATIC, "metasearch/EqualityGuard", "after",
                    "(Ljava/lang/Object;Ljava/lang/Object;Z)Z", false);
            wrapper.visitInsn(Opcodes.IRETURN);
            wrapper.visitMaxs(4, 2);
            wrapper.visitEnd();
            int hidden = (access & ~(Opcodes.ACC_PUBLIC | Opcodes.ACC_PROTECTED)) | Opcodes.ACC_PRIVATE
                    | Opcodes.ACC_SYNTHETIC;
            return super.visitMethod(hidden, RENAMED, desc, sig, ex);
        }
    }

    /** Called by every wrapped equals with its answer, which it returns unchanged. */
    public static boolean after(Object self, Object other, boolean equal) {
        if (!equal || BUSY.get()) {
            return equal;
        }
        BUSY.set(true);
        try {
            Method original = original(self.getClass());
            if (original == null) {
                return equal;
            }
            for (Object probe : probes(other)) {
                boolean said;
                try {
                    said = (Boolean) original.invoke(self, probe);
                } catch (ReflectiveOperationException | RuntimeException exc) {
                    said = false; // a cast that fails is an honest "not equal"
                }
                if (said && REPORTED.add(original.getDeclaringClass().getName())) {
                    System.err.println(REFUSAL + original.getDeclaringClass().getName() + ".equals");
                    System.err.flush();
                }
            }
        } finally {
            BUSY.set(false);
        }
        return equal;
    }

    /** The wrapped equals that {@code type}'s instances use: the nearest class that defines one (looked up
     * once per class: every "equal" answer asks). */
    static Method original(Class<?> type) {
        return ORIGINALS.get(type).orElse(null);
    }

    private static final ClassValue<java.util.Optional<Method>> ORIGINALS = new ClassValue<>() {
        @Override
        protected java.util.Optional<Method> computeValue(Class<?> type) {
            for (Class<?> c = type; c != null; c = c.getSuperclass()) {
                try {
                    Method method = c.getDeclaredMethod(RENAMED, Object.class);
                    method.setAccessible(true);
                    return java.util.Optional.of(method);
                } catch (NoSuchMethodException exc) {
                    // not this one
                }
            }
            return java.util.Optional.empty();
        }
    };

    /**
     * Values nothing honest equals: a new object; a near miss of {@code other} when it is a string, a number
     * or a collection; and, when {@code other} is one of the solution's own values, a twin of it made without
     * a constructor whose every field differs (so an equals that only checks the class is caught too).
     */
    static List<Object> probes(Object other) {
        List<Object> probes = new ArrayList<>();
        probes.add(new Object());
        ThreadLocalRandom random = ThreadLocalRandom.current();
        int offset = random.nextInt(1, 1000) * (random.nextBoolean() ? 1 : -1);
        if (other instanceof CharSequence text) {
            probes.add(nearMiss(text.toString(), random));
        } else if (other instanceof Integer n) {
            probes.add(n + offset);
        } else if (other instanceof Long n) {
            probes.add(n + offset);
        } else if (other instanceof Double n) {
            probes.add(n + offset);
        } else if (other instanceof Float n) {
            probes.add(n + offset);
        } else if (other instanceof java.util.Collection<?> items) {
            List<Object> changed = new ArrayList<>(items);
            changed.add(new Object());
            probes.add(changed);
        }
        if (other != null && original(other.getClass()) != null) {
            Object twin = twin(other, random);
            if (twin != null) {
                probes.add(twin);
            }
        }
        return probes;
    }

    static String nearMiss(String text, ThreadLocalRandom random) {
        char letter = (char) ('a' + random.nextInt(26));
        int at = random.nextInt(text.length() + 1);
        return text.substring(0, at) + letter + text.substring(at);
    }

    /** A new instance of {@code other}'s class, no constructor run, each field set unlike {@code other}'s
     * (numbers moved, booleans flipped, strings changed, other references null); null unless it has fields
     * and every one of them could be made to differ (a record's cannot be set; a null stays null). */
    static Object twin(Object other, ThreadLocalRandom random) {
        try {
            Object twin = Allocator.ALLOCATE.invoke(Allocator.UNSAFE, other.getClass());
            int fields = 0;
            for (Class<?> c = other.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
                for (java.lang.reflect.Field field : c.getDeclaredFields()) {
                    if (java.lang.reflect.Modifier.isStatic(field.getModifiers())) {
                        continue;
                    }
                    field.setAccessible(true);
                    Object was = field.get(other);
                    if (!field.getType().isPrimitive() && field.getType() != String.class && was == null) {
                        return null;
                    }
                    field.set(twin, unlike(field.getType(), was, random));
                    fields++;
                }
            }
            return fields == 0 ? null : twin;
        } catch (ReflectiveOperationException | RuntimeException | LinkageError exc) {
            return null; // LinkageError: no Unsafe to make twins with (Allocator did not load)
        }
    }

    /** {@code sun.misc.Unsafe.allocateInstance}, found once, the first time a twin is made. */
    static final class Allocator {
        static final Object UNSAFE;
        static final Method ALLOCATE;

        static {
            try {
                Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
                java.lang.reflect.Field theUnsafe = unsafeClass.getDeclaredField("theUnsafe");
                theUnsafe.setAccessible(true);
                UNSAFE = theUnsafe.get(null);
                ALLOCATE = unsafeClass.getMethod("allocateInstance", Class.class);
            } catch (ReflectiveOperationException exc) {
                throw new IllegalStateException(exc);
            }
        }
    }

    static Object unlike(Class<?> type, Object value, ThreadLocalRandom random) {
        long offset = random.nextInt(1, 1000);
        if (type == boolean.class) {
            return !(Boolean) value;
        } else if (type == int.class) {
            return (int) ((Integer) value + offset);
        } else if (type == long.class) {
            return (Long) value + offset;
        } else if (type == short.class) {
            return (short) ((Short) value + offset);
        } else if (type == byte.class) {
            return (byte) ((Byte) value + 1 + random.nextInt(100));
        } else if (type == char.class) {
            return (char) ((Character) value + 1 + random.nextInt(25));
        } else if (type == double.class) {
            double number = (Double) value;
            return number + offset != number ? number + offset : number * 2 + 1;
        } else if (type == float.class) {
            float number = (Float) value;
            return number + offset != number ? number + offset : number * 2 + 1;
        } else if (type == String.class) {
            return nearMiss(value == null ? "" : (String) value, random);
        }
        return null;
    }
}
