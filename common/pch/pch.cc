// Compiles the precompiled headers of the build (common/pch/CMakeLists.txt).
// The library that owns them holds no code of its own.
