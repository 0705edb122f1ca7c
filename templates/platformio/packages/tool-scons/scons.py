import SCons.Script  # the pip package scons==4.11.1 (PlatformIO would otherwise download it)
SCons.Script.main()
