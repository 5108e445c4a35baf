// A folder every rank of an MPI test job sees.
#pragma once

#include "mpi/mpi_test_main.hpp"

#include <filesystem>
#include <string>
#include <unistd.h>

namespace tessera::testing {

/// A fresh folder under the temp folder (named after `name` and mpiexec's pid), made by rank 0
/// before any rank uses it and removed by rank 0 at the end.
class SharedFolder {
public:
  explicit SharedFolder(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("tessera-mpi-" + name + "-" + std::to_string(::getppid())))
                  .string()) {
    if (world()->rank() == 0) {
      std::filesystem::remove_all(path_);
      std::filesystem::create_directories(path_);
    }
    world()->barrier();
  }
  ~SharedFolder() {
    world()->barrier();
    if (world()->rank() == 0) std::filesystem::remove_all(path_);
  }
  SharedFolder(const SharedFolder&) = delete;
  SharedFolder& operator=(const SharedFolder&) = delete;

  std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }

private:
  std::string path_;
};

} // namespace tessera::testing
