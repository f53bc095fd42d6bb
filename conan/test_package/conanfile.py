"""Consumes the aotpipe package as a user's CMake project would: CMakeDeps + CMakeToolchain,
find_package(aotpipe) and aotpipe::aotpipe; then runs a program that compiles a function with
aot_function and checks its output and gradient against eager PyTorch, and the compile cache's
Redis level (present exactly when the package's with_redis option says so); then writes a package
(.aotpkg) of the repository's tied_lm_head example, which package_consumer, linking only the
aotpipe::package component, trains."""
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain


class AotpipeTestPackageConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "VirtualRunEnv"
    test_type = "explicit"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        # Built in the repository's build-conan/ (ignored by git), not beside these sources.
        self.folders.build = os.path.join("..", "..", "build-conan", "test_package", str(self.settings.build_type))
        self.folders.generators = os.path.join(self.folders.build, "generators")

    def generate(self):
        toolchain = CMakeToolchain(self)
        toolchain.user_presets_path = False  # no CMakeUserPresets.json in the source tree
        # The program checks that the package has the Redis level exactly when it should.
        toolchain.cache_variables["EXPECT_REDIS"] = bool(self.dependencies[self.tested_reference_str.split("/")[0]].options.with_redis)
        toolchain.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if can_run(self):
            # The full library writes a package of the repository's tied_lm_head example; the
            # runtime-only consumer trains it.
            program = os.path.join(self.source_folder, "..", "..", "examples", "pt2", "tied_lm_head.pt2")
            package = os.path.join(self.build_folder, "tied_lm_head.aotpkg")
            self.run(f'"{os.path.join(self.build_folder, "test_package")}" "{program}" "{package}"', env="conanrun")
            self.run(f'"{os.path.join(self.build_folder, "package_consumer")}" "{package}"', env="conanrun")
