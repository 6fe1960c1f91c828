# Finds what the Python module needs: Debian's interpreter (named explicitly, since another
# interpreter may come first on PATH), its development headers and pybind11. Sets
# PAGEDKV_PYTHON_DEPS_FOUND; the top-level CMakeLists.txt turns PAGEDKV_BUILD_PYTHON on by default
# when it is true.
# Under scikit-build-core (`pip install .`, SKBUILD set) the module is built for the interpreter
# that runs pip, which scikit-build-core passes as Python_EXECUTABLE.
if(SKBUILD AND Python_EXECUTABLE)
  set(pagedkv_python_default "${Python_EXECUTABLE}")
else()
  set(pagedkv_python_default "/usr/bin/python3")
endif()
set(PAGEDKV_PYTHON_EXECUTABLE "${pagedkv_python_default}" CACHE FILEPATH
    "Python interpreter the pagedkv module is built for (Debian's python3; under pip, pip's)")
set(PAGEDKV_PYTHON_DEPS_FOUND OFF)
if(EXISTS "${PAGEDKV_PYTHON_EXECUTABLE}")
  set(Python_EXECUTABLE "${PAGEDKV_PYTHON_EXECUTABLE}")
  find_package(Python 3.11 COMPONENTS Interpreter Development.Module QUIET)
  if(Python_FOUND)
    find_package(pybind11 2.10 CONFIG QUIET)
    if(pybind11_FOUND)
      set(PAGEDKV_PYTHON_DEPS_FOUND ON)
    endif()
  endif()
endif()
