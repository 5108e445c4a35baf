// Where tests find the shared datasets, and a skip for when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tessera::testing {

/// $TESSERA_DATA_DIR, else the shared/datasets folder beside the checkout.
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("TESSERA_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return TESSERA_TEST_DATA_DIR;
}

/// Path of `relative` under the shared data folder.
inline std::string shared_data_path(const std::string& relative) {
  return (std::filesystem::path(shared_data_dir()) / relative).string();
}

}  // namespace tessera::testing

/// Skips the current test with a message when a shared dataset file is missing.
#define TESSERA_REQUIRE_DATA(relative)                                                           \
  do {                                                                                           \
    if (!std::filesystem::exists(::tessera::testing::shared_data_path(relative))) {              \
      GTEST_SKIP() << "dataset " << (relative) << " not found under "                            \
                   << ::tessera::testing::shared_data_dir() << " (set TESSERA_DATA_DIR)";        \
    }                                                                                            \
  } while (0)
